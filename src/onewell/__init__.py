"""onewell: run LLMs on CPUs at the memory-bandwidth limit, and measure how close you are."""
__version__ = "0.1.0"
