"""The SQL side of rollwright, one store per record kind over one shared engine.

`engine.Database` is the engine a process opens (and migrates) once; `deliveries`, `outbox`,
`deployments`, `audit` and `jobs` each hold a small store over it, and `tables` the SQLAlchemy
models they share. A caller builds the stores it uses over the process's `Database`.
"""
