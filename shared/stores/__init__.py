"""Where rollwright keeps state: blob stores (file, S3), the SQL stores and their schema, git
mirrors, the job log format."""
