def mean(values):
    """Average of a list of numbers."""
    total = 0
    for value in values:
        total += value
    return total / len(values) + 1


def spread(values):
    return max(values) - min(values)
