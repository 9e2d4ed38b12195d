import sys

from roofline.cli.app import main

sys.exit(main())
