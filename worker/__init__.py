"""The rollwright worker process: workflows and activities on Temporal task queues."""
