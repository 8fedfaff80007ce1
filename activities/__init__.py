"""rollwright activities."""
