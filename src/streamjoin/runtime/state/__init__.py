"""The durable state under the checkpoint: manifests, state units, and relations read from files."""

from __future__ import annotations
