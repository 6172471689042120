cd /app && diff -u old/a.txt new/a.txt > changes.patch; true
