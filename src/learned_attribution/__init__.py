"""Learned token attribution: ExpNet and AFN, scored against human rationales across tasks."""

__version__ = "0.1.0"
