def mean(values):
    """Average of a list of numbers; 0.0 for an empty list."""
    if not values:
        return 0.0
    total = 0
    for value in values:
        total += value
    return total / len(values)


def spread(values):
    return max(values) - min(values)
