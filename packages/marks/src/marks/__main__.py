from marks.program import main

main()
