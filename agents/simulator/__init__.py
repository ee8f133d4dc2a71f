"""Kueue's scheduler-performance scenarios run through the pipeline in virtual time."""
