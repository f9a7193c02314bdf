from laggard.cli import main

main()
