from kit.cli import main

raise SystemExit(main())
