printf '%s\n' pear apple pear fig apple kiwi fig banana kiwi cherry pear > words.txt
