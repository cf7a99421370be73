"""ragcli's search and answers as tools for other programs (coding agents, desktop assistants)."""
