"""rollwright workflows."""
