"""Policy sets the policy tests share: a Rego set that denies debug Deployments and warns
about ConfigMaps, and a ValidatingAdmissionPolicy the render carries that wants debug
Deployments scaled to zero."""

from __future__ import annotations

SECURITY = """package main

import rego.v1

deny contains msg if {
  input.kind == "Deployment"
  input.metadata.namespace == "debug"
  msg := sprintf("debug deployment %s may not run on staging", [input.metadata.name])
}

warn contains msg if {
  input.kind == "ConfigMap"
  msg := sprintf("ConfigMap %s: prefer a mounted Secret", [input.metadata.name])
}
"""

ADMISSION = """apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: debug-replicas
spec:
  matchConstraints:
    resourceRules:
      - apiGroups: ["apps"]
        apiVersions: ["v1"]
        operations: ["CREATE", "UPDATE"]
        resources: ["deployments"]
  validations:
    - expression: "object.metadata.namespace != 'debug' || object.spec.replicas == 0"
      messageExpression: "'debug deployment ' + object.metadata.name + ' must be scaled to zero'"
"""
