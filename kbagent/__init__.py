"""kbagent: the agent side of pytest-kernelbench (search, LLM client, prompts, CLI)."""
