cd /app/calc
printf '#!/bin/sh\necho 5\n' > calc
chmod +x calc
