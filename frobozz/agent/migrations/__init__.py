"""The agent service's migrations (ledger: agent_migrations)."""
