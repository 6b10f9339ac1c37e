"""Kafka Connect single message transforms and predicates, and the Python callables users plug in."""

from sink.transforms.chain import PYTHON_TRANSFORM, TransformChain, parse_transforms, transform_problems

__all__ = ["PYTHON_TRANSFORM", "TransformChain", "parse_transforms", "transform_problems"]
