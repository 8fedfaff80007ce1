"""The atlas layout (ATLAS compatible): docs/formats/atlas.md."""
