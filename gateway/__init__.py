"""rollwright gateway."""
