def median(values):
    n = len(values)
    return values[n // 2]
