from kit.app.cli import main

raise SystemExit(main())
