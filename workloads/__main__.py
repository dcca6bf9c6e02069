"""`python -m workloads --stack NAME`: every Kubernetes object the project builds itself for a stack, as YAML
(workloads/render.py)."""

from workloads.render import main

raise SystemExit(main())
