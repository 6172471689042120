from pathlib import Path


def test_emails():
    assert Path("/app/emails.txt").read_text().split() == [
        "alice@example.com",
        "bob.smith+news@mail.example.org",
        "help-desk@corp-1.co.uk",
        "sales_team@corp-1.co.uk",
    ]
