"""SCIM 2.0 at ``/scim/v2`` (issue #35 §3): identity providers push people and groups, which
become role grants of the pushing key's tenant."""

from retrieval_svc.scim.app import ScimGateway

__all__ = ["ScimGateway"]
