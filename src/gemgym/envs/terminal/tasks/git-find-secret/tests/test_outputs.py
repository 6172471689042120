from pathlib import Path


def test_password():
    assert Path("/app/password.txt").read_text().strip() == "Tr0ub4dor-9x"
