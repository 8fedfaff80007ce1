"""`rollwright.yaml` at the root of a fleet repo: its models section by section, the whole
(`fleet.FleetConfig`), and what its `rollout.windows` mean (`windows`, `schedule`)."""
