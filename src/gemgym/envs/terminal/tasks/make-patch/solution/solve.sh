cd /app && diff -ruN old new > changes.patch; true
