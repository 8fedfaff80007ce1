"""The `rollwright` command line: one module per subcommand family."""
