"""Migrations of the claude transcripts store (ledger: transcript_migrations)."""
