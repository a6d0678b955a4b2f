from jobrunner.cli import main

main()
