"""Attacks kept as tests, one file per attack family (issue "Hardening")."""
