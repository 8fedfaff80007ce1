"""rollwright shared."""
