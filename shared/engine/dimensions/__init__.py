"""The dimensions layout (the fleet design document's): docs/formats/dimensions.md."""
