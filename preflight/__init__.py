"""What AWS, the Hugging Face Hub and this machine's Docker would refuse, checked before `pulumi up` bills anything.

`python -m preflight --stack NAME` reads the stack file and asks, with your own credentials: the EC2 vCPU quota of
the GPU family, whether the GPU AZ offers the instance type, whether the token's secret exists in the stack's region
(its metadata, never its value), whether each s3:// data set exists and in which record format, whether the model is
there and gated and whether your token's account accepted its licence, and whether Docker can build and push the
trainer image. Every problem is printed at once, each with its fix; the exit code is 1 if there is any.
"""
