from marks.cli import main

main()
