mkdir -p bin
printf '#!/bin/sh\necho one\n' > bin/one.sh
printf '#!/bin/sh\necho two\n' > bin/two.sh
printf 'not a script\n' > bin/README
echo 's3cr3t' > secret.txt
chmod 644 bin/* secret.txt
