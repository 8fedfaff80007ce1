"""What is done to rendered Kubernetes objects: documents, scope and file names, post-render
patches, the published kustomization, and Argo CD's API schema for checking objects."""
