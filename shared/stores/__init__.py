"""Where rollwright keeps state: blob stores (file, S3), the SQL store and its schema, git
mirrors, the job log format."""
