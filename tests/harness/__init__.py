"""Test harnesses shared by the suites: the Pulumi program under the SDK's mocks."""
