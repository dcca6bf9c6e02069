"""What a maintainer applies once so the workflows can run: the IAM roles GitHub Actions assumes through OIDC (a
read-only preview role, a deploy role that only creates roles under a permissions boundary) and the `pulumi-up`
environment's protection rules. `python -m ci --help`; docs/ci.md walks through it."""
