"""The VPC: public and private subnets across AZs, NAT, and an S3 gateway endpoint; or an existing VPC."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from stack.config import NetworkConfig


@dataclass(frozen=True)
class SubnetPlan:
    availability_zone: str
    private_cidr: str
    public_cidr: str


def subnet_plan(
    vpc_cidr: str, availability_zones: list[str], private_prefix: int, public_prefix: int
) -> list[SubnetPlan]:
    """Carve the VPC CIDR: the large private subnets first (nodes and pods take their IPs from the VPC CNI), then
    the small public ones. Pure; the config check guarantees the plan fits."""
    vpc = ipaddress.IPv4Network(vpc_cidr)
    private = list(vpc.subnets(new_prefix=private_prefix))[: len(availability_zones)]
    used_until = private[-1].broadcast_address
    public_candidates = (s for s in vpc.subnets(new_prefix=public_prefix) if s.network_address > used_until)
    public = [next(public_candidates) for _ in availability_zones]
    return [SubnetPlan(az, str(pr), str(pu)) for az, pr, pu in zip(availability_zones, private, public, strict=True)]


@dataclass
class NetworkArgs:
    config: NetworkConfig
    availability_zones: list[str]
    gpu_availability_zone: str
    cluster_name: str
    region: str


class Network(pulumi.ComponentResource):
    """A VPC for one EKS cluster, or the ids of an existing one."""

    vpc_id: pulumi.Output[str]
    private_subnet_ids: pulumi.Output[list[str]]
    public_subnet_ids: pulumi.Output[list[str]]
    gpu_subnet_id: pulumi.Output[str]

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fsdp-eks:infra:Network", name, None, opts)
        if args.config.uses_existing_vpc:
            # uses_existing_vpc: the stack names the VPC and the GPU subnet (stack/checks.py refuses it otherwise).
            assert args.config.vpc_id is not None and args.config.gpu_subnet_id is not None
            self.vpc_id = pulumi.Output.from_input(args.config.vpc_id)
            self.private_subnet_ids = pulumi.Output.from_input(args.config.private_subnet_ids)
            self.public_subnet_ids = pulumi.Output.from_input(args.config.public_subnet_ids)
            self.gpu_subnet_id = pulumi.Output.from_input(args.config.gpu_subnet_id)
        else:
            self._create(name, args)
        self.register_outputs(
            {"vpcId": self.vpc_id, "privateSubnetIds": self.private_subnet_ids, "gpuSubnetId": self.gpu_subnet_id}
        )

    def _create(self, name: str, args: NetworkArgs) -> None:
        child = pulumi.ResourceOptions(parent=self)
        cfg = args.config
        # The cluster tag lets the AWS load balancer controller and EKS find these subnets.
        cluster_tag = {f"kubernetes.io/cluster/{args.cluster_name}": "shared"}
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=cfg.cidr,
            enable_dns_hostnames=True,  # EKS private endpoint and VPC endpoints need DNS hostnames
            enable_dns_support=True,
            tags={"Name": f"{args.cluster_name}-vpc"},
            opts=child,
        )
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, opts=child)
        public_routes = aws.ec2.RouteTable(
            f"{name}-public-rt", vpc_id=vpc.id, routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": igw.id}], opts=child
        )
        plan = subnet_plan(cfg.cidr, args.availability_zones, cfg.private_subnet_prefix, cfg.public_subnet_prefix)
        public_subnets, private_subnets, nats = [], [], []
        for index, zone in enumerate(plan):
            public = aws.ec2.Subnet(
                f"{name}-public-{index}",
                vpc_id=vpc.id,
                cidr_block=zone.public_cidr,
                availability_zone=zone.availability_zone,
                map_public_ip_on_launch=False,  # only NAT gateways and load balancers live here
                tags={
                    **cluster_tag,
                    "kubernetes.io/role/elb": "1",
                    "Name": f"{args.cluster_name}-public-{zone.availability_zone}",
                },
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{index}", subnet_id=public.id, route_table_id=public_routes.id, opts=child
            )
            public_subnets.append(public)
            if cfg.nat_gateways == "perAz" or index == 0:
                # A public NAT gateway and its address need the VPC's internet gateway: created after it, deleted
                # before it. Their inputs (subnet, allocation) do not say so, hence the explicit dependency
                # (terraform-provider-aws docs, aws_nat_gateway; CloudFormation docs, AWS::EC2::EIP DependsOn).
                after_igw = pulumi.ResourceOptions(parent=self, depends_on=[igw])
                eip = aws.ec2.Eip(f"{name}-nat-{index}", domain="vpc", opts=after_igw)
                nats.append(
                    aws.ec2.NatGateway(f"{name}-nat-{index}", subnet_id=public.id, allocation_id=eip.id, opts=after_igw)
                )
            private = aws.ec2.Subnet(
                f"{name}-private-{index}",
                vpc_id=vpc.id,
                cidr_block=zone.private_cidr,
                availability_zone=zone.availability_zone,
                tags={
                    **cluster_tag,
                    "kubernetes.io/role/internal-elb": "1",
                    "Name": f"{args.cluster_name}-private-{zone.availability_zone}",
                },
                opts=child,
            )
            private_routes = aws.ec2.RouteTable(
                f"{name}-private-rt-{index}",
                vpc_id=vpc.id,
                routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nats[-1].id}],
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-private-{index}", subnet_id=private.id, route_table_id=private_routes.id, opts=child
            )
            private_subnets.append((zone.availability_zone, private, private_routes))
        # Model weights, datasets and checkpoints move through S3: a gateway endpoint keeps that traffic off the NAT
        # (no per-GB NAT charge) at no cost.
        aws.ec2.VpcEndpoint(
            f"{name}-s3",
            vpc_id=vpc.id,
            service_name=f"com.amazonaws.{args.region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=[routes.id for _, _, routes in private_subnets],
            opts=child,
        )
        self.vpc_id = vpc.id
        self.private_subnet_ids = pulumi.Output.all(*[s.id for _, s, _ in private_subnets])
        self.public_subnet_ids = pulumi.Output.all(*[s.id for s in public_subnets])
        gpu_subnet = next(s for az, s, _ in private_subnets if az == args.gpu_availability_zone)
        self.gpu_subnet_id = gpu_subnet.id
