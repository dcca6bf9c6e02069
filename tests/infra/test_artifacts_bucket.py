"""The runs' artifacts in S3 under the mocks (infra/artifacts.py, infra/trainer_access.py, __main__.py): the stack's own
bucket, private, encrypted, versioned and kept by `pulumi destroy`; nothing S3 created for a given bucket; one Pod
Identity role per service account, allowed to write the stack's prefix and to read s3:// inputs elsewhere only."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import parliament
import pytest

from infra.artifacts import ABANDONED_UPLOAD_DAYS, NONCURRENT_VERSION_DAYS, tls_only_policy
from infra.s3_access import (
    READ_ACTIONS,
    WRITE_ACTIONS,
    artifacts_policy,
    input_patterns,
    inputs_outside,
    read_only_policy,
)
from infra.trainer_access import FORMER_TYPE, former_name
from stack.artifacts import CREATED_BUCKET_OUTPUT
from stack.fields import NAMESPACE
from stack.files import raw_stack_config
from stack.names import (
    ARTIFACTS_BUCKET_PREFIX,
    BUCKET_PREFIX_MAX_LENGTH,
    IAM_PATH,
    STACK_TAG_KEY,
    TRAINING_NAMESPACE,
    artifacts_bucket_prefix,
)
from tests.harness.fake_cloud import PREVIOUS_OUTPUTS_VARIABLE
from tests.harness.pulumi_program import (
    ProgramRun,
    Registered,
    engine_config,
    run_in_process,
    run_program,
    with_deployers_address,
)
from trainer.base.s3.model_upload import download_command
from trainer.base.s3.uri import S3Uri, bucket_name_problem
from workloads.job.spec import trainer_service_account

BUCKET = "aws:s3/bucket:Bucket"
S3_CONFIGURATION = {
    "versioning": "aws:s3/bucketVersioning:BucketVersioning",
    "encryption": "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "public": "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
    "ownership": "aws:s3/bucketOwnershipControls:BucketOwnershipControls",
    "lifecycle": "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration",
    "policy": "aws:s3/bucketPolicy:BucketPolicy",
}
POLICY = "aws:iam/policy:Policy"
ROLE = "aws:iam/role:Role"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
ACCESS = "fsdp-eks:infra:TrainerAccess"
GIVEN_BUCKET = "team-ml-artifacts"
DATASET = "s3://team-data/corpora/dialogs.jsonl"
JOB = f"{NAMESPACE}:job"
ARTIFACTS = f"{NAMESPACE}:artifacts"


@cache
def own_bucket() -> ProgramRun:
    run = run_program("dev")
    assert run.error is None, run.error
    return run


@cache
def given_bucket_with_s3_dataset() -> ProgramRun:
    job = {**raw_stack_config("dev")[JOB], "dataset": DATASET}
    run = run_program("dev", {ARTIFACTS: {"bucket": GIVEN_BUCKET, "prefix": "teams/ml"}, JOB: job})
    assert run.error is None, run.error
    return run


def statements(document: str) -> list[dict[str, Any]]:
    return json.loads(document)["Statement"]


def policy_named(run: ProgramRun, part: str) -> Registered:
    (found,) = [p for p in run.of_type(POLICY) if part in p.name]
    return found


@pytest.mark.program
def test_the_stack_creates_one_bucket_under_its_prefix_with_its_tag() -> None:
    bucket = own_bucket().one(BUCKET)
    assert bucket.inputs["bucketPrefix"] == artifacts_bucket_prefix("dev") == "fsdp-eks-dev-artifacts-"
    assert bucket.outputs["bucket"].startswith(ARTIFACTS_BUCKET_PREFIX) and not bucket_name_problem(bucket.id)
    assert bucket.inputs["forceDestroy"] is False
    assert bucket.inputs["tags"] == {STACK_TAG_KEY: "dev"}


@pytest.mark.program
def test_pulumi_destroy_keeps_the_bucket_and_every_configuration_of_it() -> None:
    run = own_bucket()
    kept = [run.one(BUCKET), *(run.one(type_token) for type_token in S3_CONFIGURATION.values())]
    assert all(resource.retain_on_delete for resource in kept), [r.name for r in kept if not r.retain_on_delete]
    # and nothing else is kept by accident: a retained cluster or role would outlive the stack
    assert {r.type for r in run.resources if r.retain_on_delete} == {BUCKET, *S3_CONFIGURATION.values()}


@pytest.mark.program
def test_every_configuration_applies_to_the_created_bucket() -> None:
    run = own_bucket()
    name = run.one(BUCKET).outputs["bucket"]
    assert {run.one(type_token).inputs["bucket"] for type_token in S3_CONFIGURATION.values()} == {name}


@pytest.mark.program
def test_the_bucket_is_versioned_encrypted_private_and_owner_enforced() -> None:
    run = own_bucket()
    assert run.one(S3_CONFIGURATION["versioning"]).inputs["versioningConfiguration"] == {"status": "Enabled"}
    (rule,) = run.one(S3_CONFIGURATION["encryption"]).inputs["rules"]
    assert rule["applyServerSideEncryptionByDefault"] == {"sseAlgorithm": "AES256"}
    public = run.one(S3_CONFIGURATION["public"]).inputs
    flags = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    assert all(public[flag] is True for flag in flags)
    assert run.one(S3_CONFIGURATION["ownership"]).inputs["rule"] == {"objectOwnership": "BucketOwnerEnforced"}


@pytest.mark.program
def test_old_versions_their_delete_markers_and_abandoned_uploads_expire_and_current_objects_stay() -> None:
    (rule,) = own_bucket().one(S3_CONFIGURATION["lifecycle"]).inputs["rules"]
    assert rule["status"] == "Enabled" and rule["filter"] == {}
    assert rule["noncurrentVersionExpiration"] == {"noncurrentDays": NONCURRENT_VERSION_DAYS}
    assert rule["abortIncompleteMultipartUpload"] == {"daysAfterInitiation": ABANDONED_UPLOAD_DAYS}
    # Only the markers left with no noncurrent version: no Days or Date, which would expire current objects.
    assert rule["expiration"] == {"expiredObjectDeleteMarker": True}


@pytest.mark.program
def test_the_bucket_refuses_requests_without_tls_after_its_public_access_block() -> None:
    run = own_bucket()
    policy = run.one(S3_CONFIGURATION["policy"])
    (deny,) = statements(policy.inputs["policy"])
    arn = run.one(BUCKET).outputs["arn"]
    assert deny["Effect"] == "Deny" and deny["Principal"] == "*" and deny["Action"] == "s3:*"
    assert deny["Resource"] == [arn, f"{arn}/*"]
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert run.one(S3_CONFIGURATION["public"]).urn in policy.dependencies


@pytest.mark.program
def test_a_given_bucket_is_used_as_it_is_and_nothing_s3_is_created() -> None:
    run = given_bucket_with_s3_dataset()
    assert not [r for r in run.resources if r.type.startswith("aws:s3/")]
    assert not run.of_type("fsdp-eks:infra:ArtifactsBucket")
    assert run.outputs["artifactsUri"] == f"s3://{GIVEN_BUCKET}/teams/ml/dev/run-1/"


@pytest.mark.program
def test_the_pods_write_and_list_only_their_own_run_in_the_artifacts_bucket() -> None:
    run = own_bucket()
    name = run.one(BUCKET).outputs["bucket"]
    write, listing, location = statements(policy_named(run, "artifacts").inputs["policy"])
    assert write["Action"] == list(WRITE_ACTIONS) and write["Resource"] == f"arn:aws:s3:::{name}/fsdp-eks/dev/run-1/*"
    assert listing["Action"] == "s3:ListBucket" and listing["Resource"] == f"arn:aws:s3:::{name}"
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["fsdp-eks/dev/run-1/*"]}}
    assert location["Action"] == "s3:GetBucketLocation"
    assert not [p for p in run.of_type(POLICY) if "inputs" in p.name]  # no s3:// input: nothing to read elsewhere


def test_a_run_prefix_without_its_slash_is_refused_as_it_would_match_run_10() -> None:
    with pytest.raises(ValueError, match="run-10"):
        artifacts_policy("aws", "fsdp-eks-dev-artifacts-0001", "fsdp-eks/dev/run-1")


@pytest.mark.program
def test_an_s3_dataset_elsewhere_is_read_only_and_exactly_its_key() -> None:
    run = given_bucket_with_s3_dataset()
    read, listing = statements(policy_named(run, "inputs").inputs["policy"])
    assert read["Action"] == list(READ_ACTIONS) == ["s3:GetObject"]
    key = "corpora/dialogs.jsonl"
    assert read["Resource"] == [f"arn:aws:s3:::team-data/{key}", f"arn:aws:s3:::team-data/{key}/*"]
    assert listing["Action"] == "s3:ListBucket" and listing["Resource"] == "arn:aws:s3:::team-data"
    assert listing["Condition"] == {"StringLike": {"s3:prefix": [key, f"{key}/*"]}}
    everything = [s for p in run.of_type(POLICY) for s in statements(p.inputs["policy"])]
    writes = [s for s in everything if {"s3:PutObject", "s3:DeleteObject"} & set(s["Action"])]
    assert [w["Resource"] for w in writes] == [f"arn:aws:s3:::{GIVEN_BUCKET}/teams/ml/dev/run-1/*"]


@pytest.mark.parametrize(
    ("key", "patterns"),
    [
        ("data", ["data", "data/*"]),  # never data*: s3://b/data-private/ stays closed
        ("data/", ["data/*"]),
        ("sets/train.jsonl", ["sets/train.jsonl", "sets/train.jsonl/*"]),
        ("", ["*"]),
    ],
)
def test_an_inputs_grant_is_its_key_and_what_is_below_it(key: str, patterns: list[str]) -> None:
    assert input_patterns(key) == patterns


def test_another_run_of_the_stack_is_an_input_read_only_and_this_run_is_not() -> None:
    bucket = "fsdp-eks-dev-artifacts-0001"
    older = f"s3://{bucket}/fsdp-eks/dev/run-1/checkpoints"
    own = f"s3://{bucket}/fsdp-eks/dev/run-2/checkpoints"
    assert inputs_outside([older, own], bucket, "fsdp-eks/dev/run-2/") == [S3Uri.parse(older)]


@pytest.mark.program
def test_one_role_and_one_association_for_the_jobs_service_account() -> None:
    for run in (own_bucket(), given_bucket_with_s3_dataset()):
        (association,) = [a.inputs for a in run.of_type(ASSOCIATION) if a.inputs["namespace"] == TRAINING_NAMESPACE]
        account = trainer_service_account("fsdp-dev")
        assert (association["namespace"], association["serviceAccount"]) == (TRAINING_NAMESPACE, account)
        (role,) = [r for r in run.of_type(ROLE) if r.parent == run.one(ACCESS).urn]
        assert role.outputs["arn"] == association["roleArn"] and role.inputs["path"] == IAM_PATH


@pytest.mark.program
def test_every_policy_of_the_pods_is_under_the_path_with_the_tag() -> None:
    run = given_bucket_with_s3_dataset()
    access = run.one(ACCESS).urn
    policies = [p for p in run.of_type(POLICY) if p.parent == access]
    assert len(policies) == 2  # the artifacts bucket's and the inputs'; dev names no token secret
    assert all(p.inputs["path"] == IAM_PATH and p.inputs["tags"] == {STACK_TAG_KEY: "dev"} for p in policies)


@pytest.mark.program
def test_the_access_component_keeps_the_former_hub_token_roles_and_associations_urns() -> None:
    """Pulumi aliases a child whose name starts with its parent's name to the parent alias's name with the same
    tail (pulumi sdk runtime/resource.py inherited_child_alias), so the role and the association keep their URNs."""
    run = own_bucket()
    access = run.one(ACCESS)
    (alias,) = access.aliases
    assert (alias["name"], alias["type"]) == (former_name("job"), FORMER_TYPE) == ("job-hub-token", FORMER_TYPE)
    for type_token, former in ((ROLE, "job-hub-token-role"), (ASSOCIATION, "job-hub-token-association")):
        (child,) = [r for r in run.of_type(type_token) if r.parent == access.urn]
        assert child.name.startswith(access.name)
        assert alias["name"] + child.name[len(access.name) :] == former


@pytest.mark.program
def test_the_outputs_name_the_run_and_the_commands_that_list_and_download_it() -> None:
    run = own_bucket()
    uri = run.outputs["artifactsUri"]
    assert uri == f"s3://{run.one(BUCKET).outputs['bucket']}/fsdp-eks/dev/run-1/"
    assert S3Uri.parse(uri).key == "fsdp-eks/dev/run-1/"
    commands = run.outputs["nextCommands"]
    assert commands["artifacts"].startswith(f"aws s3 ls {uri}")
    assert commands["downloadModel"] == download_command(S3Uri.parse(f"{uri}model/"))
    assert "kubeconfig" in commands  # the platform's commands stay


@pytest.mark.parametrize(
    "document",
    [
        artifacts_policy("aws", "fsdp-eks-dev-artifacts-0001", "fsdp-eks/dev/run-1/"),
        read_only_policy("aws", [S3Uri.parse(DATASET), S3Uri.parse("s3://models/llama/")]),
    ],
)
def test_parliament_finds_nothing_in_the_pods_s3_policies(document: str) -> None:
    findings = parliament.analyze_policy_string(document).findings
    assert [(f.issue, f.detail) for f in findings] == []


def test_parliament_finds_nothing_in_the_bucket_policy() -> None:
    findings = parliament.analyze_policy_string(tls_only_policy("arn:aws:s3:::fsdp-eks-x")).findings
    assert [(f.issue, f.detail) for f in findings] == []


@pytest.mark.parametrize("stack", ["dev", "A_Very.Long-Stack_Name-that-goes-on-and-on-and-on", "x"])
def test_the_bucket_prefix_fits_the_provider_and_the_ci_roles_scope(stack: str) -> None:
    prefix = artifacts_bucket_prefix(stack)
    assert prefix.startswith(ARTIFACTS_BUCKET_PREFIX) and len(prefix) <= BUCKET_PREFIX_MAX_LENGTH
    assert bucket_name_problem(prefix + "2" * 26) is None  # the provider's 26-character suffix


def run_after_an_up_that_exported(stack: str, outputs: dict[str, Any], preview: str) -> ProgramRun:
    """The program previewed after an `up` whose outputs were `outputs`: its StackReference to itself reads them."""
    raw = raw_stack_config(stack)
    env = {
        "PULUMI_CONFIG": engine_config(with_deployers_address(raw) if preview == "first" else raw),
        "PULUMI_CONFIG_SECRET_KEYS": "[]",
        PREVIOUS_OUTPUTS_VARIABLE: json.dumps(outputs),
    }
    return run_in_process("tests.harness.mock_runner", stack, env, preview)


@pytest.mark.program
def test_the_stack_exports_the_bucket_it_created_and_none_for_a_given_one() -> None:
    assert own_bucket().outputs[CREATED_BUCKET_OUTPUT] == own_bucket().one(BUCKET).outputs["bucket"]
    assert given_bucket_with_s3_dataset().outputs[CREATED_BUCKET_OUTPUT] is None


@pytest.mark.program
@pytest.mark.parametrize("preview", ["first", "update"])
def test_a_preview_after_the_up_that_created_the_bucket_passes(preview: str) -> None:
    created = own_bucket().one(BUCKET).outputs["bucket"]
    run = run_after_an_up_that_exported("dev", {CREATED_BUCKET_OUTPUT: created, "region": "us-east-1"}, preview)
    assert run.error is None, run.error


@pytest.mark.program
@pytest.mark.parametrize("preview", ["first", "update"])
def test_a_renamed_stack_is_refused_before_it_replaces_its_bucket(preview: str) -> None:
    """`pulumi stack rename old dev` keeps the state and its outputs; the bucket's prefix is now dev's, which would
    replace the bucket old created and leave every run's checkpoints outside the stack."""
    kept = f"{artifacts_bucket_prefix('old')}{'1' * 26}"
    run = run_after_an_up_that_exported("dev", {CREATED_BUCKET_OUTPUT: kept, "region": "us-east-1"}, preview)
    assert run.error is not None and run.error["kind"] == "ConfigError"
    (problem,) = run.error["problems"]
    assert f"this stack created {kept} before, which this change would replace" in problem
    assert f"pulumi config set --path fsdp-eks:artifacts.bucket {kept}" in problem


@pytest.mark.program
def test_a_stack_moved_to_another_region_is_refused_before_it_replaces_its_bucket() -> None:
    created = own_bucket().one(BUCKET).outputs["bucket"]
    run = run_after_an_up_that_exported("dev", {CREATED_BUCKET_OUTPUT: created, "region": "eu-west-1"}, "update")
    assert run.error is not None
    (problem,) = run.error["problems"]
    assert "it is in eu-west-1 and the stack now in us-east-1" in problem and "name a bucket in us-east-1" in problem
