"""Tests that run each example's runbook against its keyless model."""
