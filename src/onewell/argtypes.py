"""argparse value types shared by the command-line entry points (cli, bench, chat): a bad value is rejected
at parse time with argparse's usual one-line message."""
import argparse


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value
