"""rollwright worker."""
