"""Policy sets over a root's rendered manifests (rollwright.yaml `policies`,
docs/governance.md): Rego as conftest reads it (`rego`), Kubernetes ValidatingAdmissionPolicy
CEL (`admission`), the objects they look at (`objects`) and a root's findings (`sets`)."""
